"""What shows results: paper-style tables, notebook display, HTML assets and the pages' jinja templates."""
