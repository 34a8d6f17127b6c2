"""OpenEnv launcher for the LedgerShield servers (see server/app.py)."""
