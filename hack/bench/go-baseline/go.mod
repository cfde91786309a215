module shmguard.local/go-baseline

go 1.22
