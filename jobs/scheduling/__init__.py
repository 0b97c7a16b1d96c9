"""The scheduler: what asks for a tick, and (in time) the tick itself."""
