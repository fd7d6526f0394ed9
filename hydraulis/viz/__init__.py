"""Pictures of Hydraulis artifacts (matplotlib, Agg backend; kept out of the pure core)."""
