"""What runs beside the web's views: serve's supervisor, the sweep loop's services and report."""
