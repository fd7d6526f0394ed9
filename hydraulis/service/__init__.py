"""The HTTP planning service (FastAPI) over the planner and dispatch."""
