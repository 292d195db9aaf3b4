"""Tools: install checks in fresh virtual environments, and the shipped filament movie."""
