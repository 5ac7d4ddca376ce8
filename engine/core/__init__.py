"""The core: one question answered, the Decider, the routes, escalation, absence, limits; above the router."""
