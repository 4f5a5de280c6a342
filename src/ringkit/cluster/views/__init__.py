"""Views: the cluster view every client routes by, and the stores it is read from and written to."""
