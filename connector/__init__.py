"""The formsync connector: a typed client, signature verification, a receiver and a SQL store."""
