"""The web view's static files (index.html, ui.js, ui.css), shipped in the
package; placement/handlers/ui.py serves them under /ui/."""
