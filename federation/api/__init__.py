"""Pydantic models of the Kueue v1beta2 and kfed v1alpha1 objects, and the CRDs generated from them (pure)."""
