"""flowmem's own agent runtime: tools, models and a turn loop that survives crashes."""
