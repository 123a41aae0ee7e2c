"""Screens: the main view and the modal help, search and quit-confirmation screens."""
