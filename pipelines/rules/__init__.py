"""The rules several journeys share, each in one place: the contact rule (``contact``),
the names a user gives jobs and cursors (``names``)."""
