"""Profiles (personas with their own agents) and the routes that pick one for each inbound source."""
