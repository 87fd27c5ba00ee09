"""An emulated WAN between clusters on one machine (toxiproxy.py)."""
