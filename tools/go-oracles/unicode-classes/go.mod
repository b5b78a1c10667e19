module unicodeclasses

go 1.26.0
