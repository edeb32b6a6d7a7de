"""``vigil review``: a page where people label production turns; every label is a ``feedback`` row."""
