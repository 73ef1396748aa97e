"""The composition root: the only package that sees every domain. It builds sessions."""
