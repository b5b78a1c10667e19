module urlparse

go 1.26.0
