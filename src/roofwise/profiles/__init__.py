"""Machine profiles: values, loading and validation, the built-ins."""
