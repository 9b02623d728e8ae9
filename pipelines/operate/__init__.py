"""Running formsync unattended: the configured ``[[jobs]]`` checked and run (``jobs.py``)
by the scheduler (``scheduler.py``, ``formsync run``), what ``formsync status`` shows
(``status.py``), what needs attention (``health.py``), the same as Prometheus metrics
(``metrics.py``), notices of failures (``notify.py``) and the systemd units and nginx site
(``deploy.py``, templates in ``templates/``)."""
