//! Every environment variable declared once, and the app configuration parsed into a validated form with all diagnostics.
