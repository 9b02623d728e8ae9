"""What a long-running formsync process shares (receiver, scheduler, outreach, sandbox):
stopping on SIGINT and SIGTERM (``signals.py``), a warning that repeats while its cause
lasts (``repeats.py``) and a request the HTTP parser refuses, logged in one line
(``serverlog.py``)."""
