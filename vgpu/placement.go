package vgpu

import "fmt"

// choose picks a GPU for each of n vGPUs of p, without changing anything:
// breadth-first takes the GPU with the fewest vGPUs, depth-first the one
// with the most that still has room, ties going to the lowest index; GPUs
// that hold another type, are full, have ECC on where the model refuses
// it, are in passthrough or are of another model are skipped. The vGPUs of one VM go to different GPUs.
// When nothing fits, the error says why for every GPU.
func (h *Host) choose(p Profile, n int) ([]*GPU, error) {
	pending := make([]int, len(h.gpus))
	out := make([]*GPU, 0, n)
	for range n {
		best := -1
		bestLoad := 0
		var refused []GPURefusal
		for i, g := range h.gpus {
			free, why := g.Free(p)
			if why == 0 && pending[i] > 0 {
				why = RefusedSameVM
			}
			if why != 0 {
				refused = append(refused, GPURefusal{Index: i, Reason: why, Detail: g.detail(why)})
				continue
			}
			_ = free
			load := g.count
			if best < 0 ||
				h.cfg.Placement == BreadthFirst && load < bestLoad ||
				h.cfg.Placement == DepthFirst && load > bestLoad {
				best, bestLoad = i, load
			}
		}
		if best < 0 {
			return nil, &PlacementError{Profile: p.Name, GPUs: refused}
		}
		pending[best]++
		out = append(out, h.gpus[best])
	}
	return out, nil
}

// detail describes a refusal for an error message.
func (g *GPU) detail(r Refusal) string {
	switch r {
	case RefusedModel:
		return g.spec.Model
	case RefusedOtherType:
		return fmt.Sprintf("%d x %s", g.count, g.typ.Name)
	case RefusedFull:
		return fmt.Sprintf("%d of %d", g.count, g.typ.MaxInstances)
	case RefusedPassthrough:
		return "VM " + g.passthrough.id
	}
	return ""
}

// choosePassthrough picks the first empty GPU of the model for a VM that
// takes a whole GPU.
func (h *Host) choosePassthrough() (*GPU, error) {
	var refused []GPURefusal
	for i, g := range h.gpus {
		switch {
		case g.passthrough != nil:
			refused = append(refused, GPURefusal{Index: i, Reason: RefusedPassthrough, Detail: g.detail(RefusedPassthrough)})
		case g.count > 0:
			refused = append(refused, GPURefusal{Index: i, Reason: RefusedOtherType, Detail: g.detail(RefusedOtherType)})
		default:
			return g, nil
		}
	}
	return nil, &PlacementError{Profile: h.cfg.GPU.Model + "-passthrough", GPUs: refused}
}
