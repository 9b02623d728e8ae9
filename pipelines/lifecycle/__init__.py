"""The data's life after it arrived: the files answers name, archived (``archive/``,
``formsync files``), answers past their retention removed (``purge.py``) and a person's
data erased on request (``erase.py``)."""
