// See vulkan_devices.h. The few Vulkan 1.0 declarations needed are written out here (from the
// Vulkan 1.0 specification, "Devices and Queues" and "Initialization"): handles are pointers,
// VkPhysicalDeviceProperties starts {apiVersion, driverVersion, vendorID, deviceID (uint32),
// deviceType (int32), deviceName[256]}; the rest of the struct (limits, sparse properties,
// under 1 KiB) is only given room.
#include "vulkan_devices.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace ropewalk {
namespace {

using VkInstance = void*;
using VkPhysicalDevice = void*;
using VkResult = int32_t;

struct VkInstanceCreateInfo {
  int32_t sType;  // VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
  const void* pNext;
  uint32_t flags;
  const void* pApplicationInfo;  // null: Vulkan 1.0
  uint32_t enabledLayerCount;
  const char* const* ppEnabledLayerNames;
  uint32_t enabledExtensionCount;
  const char* const* ppEnabledExtensionNames;
};

struct PropertiesHead {
  uint32_t apiVersion, driverVersion, vendorID, deviceID;
  int32_t deviceType;
  char deviceName[256];
};

using CreateInstance = VkResult (*)(const VkInstanceCreateInfo*, const void*, VkInstance*);
using DestroyInstance = void (*)(VkInstance, const void*);
using EnumeratePhysicalDevices = VkResult (*)(VkInstance, uint32_t*, VkPhysicalDevice*);
using GetPhysicalDeviceProperties = void (*)(VkPhysicalDevice, void*);

const char* TypeName(int32_t t) {
  switch (t) {
    case 1: return "integrated";
    case 2: return "discrete";
    case 3: return "virtual";
    case 4: return "cpu";
    default: return "other";
  }
}

template <typename Fn>
Fn Symbol(void* lib, const char* name) {
  auto fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (fn == nullptr) throw std::runtime_error(std::string("libvulkan.so.1 has no ") + name);
  return fn;
}

}  // namespace

std::vector<VulkanDevice> ListVulkanDevices() {
  // Kept loaded: unloading the loader while a driver's threads may linger is not worth the bytes.
  static void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) throw std::runtime_error("no Vulkan loader (libvulkan.so.1)");
  auto create = Symbol<CreateInstance>(lib, "vkCreateInstance");
  auto destroy = Symbol<DestroyInstance>(lib, "vkDestroyInstance");
  auto enumerate = Symbol<EnumeratePhysicalDevices>(lib, "vkEnumeratePhysicalDevices");
  auto properties = Symbol<GetPhysicalDeviceProperties>(lib, "vkGetPhysicalDeviceProperties");
  VkInstanceCreateInfo info{};
  info.sType = 1;
  VkInstance instance = nullptr;
  VkResult rc = create(&info, nullptr, &instance);
  // VK_ERROR_INCOMPATIBLE_DRIVER (-9): the loader found no driver at all.
  if (rc == -9) return {};
  if (rc != 0) throw std::runtime_error("vkCreateInstance failed (VkResult " + std::to_string(rc) + ")");
  std::vector<VulkanDevice> out;
  uint32_t count = 0;
  if (enumerate(instance, &count, nullptr) == 0 && count > 0) {
    std::vector<VkPhysicalDevice> devices(count);
    if (enumerate(instance, &count, devices.data()) >= 0) {
      for (uint32_t i = 0; i < count; i++) {
        alignas(16) unsigned char buffer[4096];  // the whole struct is under 1 KiB
        std::memset(buffer, 0, sizeof buffer);
        properties(devices[i], buffer);
        PropertiesHead head;
        std::memcpy(&head, buffer, sizeof head);
        head.deviceName[255] = '\0';
        out.push_back({head.deviceName, TypeName(head.deviceType)});
      }
    }
  }
  destroy(instance, nullptr);
  return out;
}

}  // namespace ropewalk
