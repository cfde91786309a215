module shmguard.local/latprobe

go 1.22
