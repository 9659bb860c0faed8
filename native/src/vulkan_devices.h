// The Vulkan physical devices of this machine (name and type), read through the system's Vulkan
// loader (libvulkan.so.1, dlopened; no Vulkan headers or SDK needed). On Linux Dawn, the WebGPU
// implementation inside ONNX Runtime, finds its adapters through the same loader, so this is
// how Ropewalk names the WebGPU adapter and tells a GPU from a software renderer (Mesa's
// lavapipe, type "cpu"): ONNX Runtime 1.30's WebGPU provider reports neither.
#pragma once
#include <string>
#include <vector>

namespace ropewalk {

struct VulkanDevice {
  std::string name;  // VkPhysicalDeviceProperties::deviceName, e.g. "NVIDIA GeForce RTX 4090", "llvmpipe (LLVM 19.1.7, 256 bits)"
  std::string type;  // "discrete", "integrated", "virtual", "cpu" or "other" (VkPhysicalDeviceType)
};

/**
 * Lists the devices. @throws std::runtime_error (one line) when there is no Vulkan loader or
 * vkCreateInstance fails; an empty list when the loader finds no driver's device.
 */
std::vector<VulkanDevice> ListVulkanDevices();

}  // namespace ropewalk
