"""A faithful local implementation of the Form Collection Service (the sandbox)."""
