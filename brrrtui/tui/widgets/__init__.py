"""Thin Textual widgets over the pure renderers in brrrtui.present (one widget per module)."""
