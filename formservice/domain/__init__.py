"""State and rules of the service, one module per resource. Nothing here sees HTTP."""
