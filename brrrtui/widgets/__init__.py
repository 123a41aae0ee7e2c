"""Thin Textual widgets over the pure renderers in brrrtui.render (one widget per module)."""
