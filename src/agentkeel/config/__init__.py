"""Settings layers, parsed once, and the trust a user gives a project."""
