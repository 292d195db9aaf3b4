"""What builds the documentation site: the mkdocs hooks, the settings reference and the plume figures."""
