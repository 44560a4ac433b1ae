"""Decision models: the engines tracediff can test, each behind the model seam (tracediff.model)."""
