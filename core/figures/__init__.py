"""Figures, one module per page family (common: what they share). Plotly only; no streamlit."""
