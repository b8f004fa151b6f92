"""The speed benchmark and the straightforward port it is measured against."""
