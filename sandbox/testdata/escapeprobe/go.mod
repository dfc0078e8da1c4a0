module escapeprobe

go 1.26
