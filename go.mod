module github.com/weftrt/weft

go 1.25.0

require (
	golang.org/x/net v0.55.0
	golang.org/x/sys v0.47.0
)

require (
	github.com/chzyer/readline v1.5.1 // indirect
	github.com/google/pprof v0.0.0-20250820193118-f64d9cf942d6 // indirect
	github.com/ianlancetaylor/demangle v0.0.0-20250417193237-f615e6bd150b // indirect
)
