module regexporacle

go 1.22
