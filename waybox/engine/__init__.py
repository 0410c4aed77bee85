"""The engine: state machines, the orchestrator and its actors, and the hook runner."""
