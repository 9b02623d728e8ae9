"""The sandbox: the service run locally with test helpers.

``seed`` creates and keeps the credentials, ``helpers`` holds the test helpers (state
and rules, registered like the domain methods), ``binding`` serves them at
``POST /api/sandbox``, ``runner`` starts and stops a sandbox (``SandboxServer``) and
``client`` calls the helpers over HTTP (``SandboxHelpers``); ``recipient`` answers a
request page as its recipient does (the demo and the tests). This package module imports
none of them, so the app can import the binding without importing the runner."""
