"""Connecting to the service: signing in (``login.py``, ``formsync login``) and the
receiver's webhook subscriptions (``subscriptions.py``, ``formsync subscribe``)."""
