"""Browser tests of the inspector (/ui) and the offline /docs."""
