"""What formsync is configured with: the settings (``settings.py``: the TOML file plus
``FORMSYNC_*`` variables), the webhook signing secrets file (``secrets_file.py``) and the
store's key file that seals the secrets the store keeps (``keyfile.py``)."""
