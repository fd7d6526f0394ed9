"""Scheme spaces: measured on devices, derived analytically, or imported from the original
system's pools. The analytic generator and the importer need no torch."""
