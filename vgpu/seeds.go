package vgpu

// mix64 is the splitmix64 finaliser: a bijective scrambler that turns
// counters and seeds into well-spread 64-bit values.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// derive returns a seed for a named purpose from a parent seed, so that
// the RAM, each framebuffer window and each workload of a VM draw from
// unrelated streams.
func derive(seed uint64, purpose uint64) uint64 {
	return mix64(mix64(seed) ^ mix64(purpose+0x632be59bd9b4e019))
}

// Purposes of derived seeds.
const (
	seedRAM uint64 = iota + 1
	seedWindow
	seedGPU
	seedVM
	seedGeneration
	seedRemote
)

// windowSeed is the seed of the framebuffer window of vGPU index of a VM.
func windowSeed(vmSeed uint64, index int) uint64 {
	return derive(vmSeed, seedWindow<<32|uint64(index))
}
