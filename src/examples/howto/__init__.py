"""The code of the how-to guides: one module per guide, in the order of the How-to section."""
