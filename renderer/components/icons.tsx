/**
 * The few line icons the window uses, as inline SVG (no icon font, nothing fetched). Decorative:
 * every icon is aria-hidden; the button around it carries the accessible name.
 */
import type { ReactElement } from 'react';

type IconProps = { size?: number };

function svg(path: ReactElement, size = 16): ReactElement {
  return (
    <svg
      className="icon"
      width={size}
      height={size}
      viewBox="0 0 24 24"
      fill="none"
      stroke="currentColor"
      strokeWidth={2}
      strokeLinecap="round"
      strokeLinejoin="round"
      aria-hidden="true"
      focusable="false"
    >
      {path}
    </svg>
  );
}

export const PlusIcon = ({ size }: IconProps) => svg(<path d="M12 5v14M5 12h14" />, size);
export const SearchIcon = ({ size }: IconProps) =>
  svg(
    <>
      <circle cx="11" cy="11" r="7" />
      <path d="m20 20-3.5-3.5" />
    </>,
    size,
  );
export const PencilIcon = ({ size }: IconProps) => svg(<path d="M4 20h4L19 9l-4-4L4 16v4zM14 6l4 4" />, size);
export const TrashIcon = ({ size }: IconProps) => svg(<path d="M4 7h16M10 11v6M14 11v6M6 7l1 13h10l1-13M9 7V4h6v3" />, size);
export const CopyIcon = ({ size }: IconProps) =>
  svg(
    <>
      <rect x="9" y="9" width="11" height="11" rx="2" />
      <path d="M5 15V5a2 2 0 0 1 2-2h8" />
    </>,
    size,
  );
export const CheckIcon = ({ size }: IconProps) => svg(<path d="m5 12 5 5 9-10" />, size);
export const SendIcon = ({ size }: IconProps) => svg(<path d="M12 19V5M6 11l6-6 6 6" />, size);
export const StopIcon = ({ size }: IconProps) => svg(<rect x="7" y="7" width="10" height="10" rx="1.5" fill="currentColor" />, size);
export const RefreshIcon = ({ size }: IconProps) => svg(<path d="M20 11a8 8 0 1 0-2.3 5.7M20 5v6h-6" />, size);
export const XIcon = ({ size }: IconProps) => svg(<path d="M6 6l12 12M18 6 6 18" />, size);
export const PanelIcon = ({ size }: IconProps) =>
  svg(
    <>
      <rect x="3" y="4" width="18" height="16" rx="2" />
      <path d="M15 4v16" />
    </>,
    size,
  );
export const ChipIcon = ({ size }: IconProps) =>
  svg(
    <>
      <rect x="6" y="6" width="12" height="12" rx="2" />
      <path d="M9 2v4M15 2v4M9 18v4M15 18v4M2 9h4M2 15h4M18 9h4M18 15h4" />
    </>,
    size,
  );
export const ChatIcon = ({ size }: IconProps) => svg(<path d="M21 12a8 8 0 0 1-11.6 7.1L4 20l1-4.6A8 8 0 1 1 21 12z" />, size);
export const SidebarIcon = ({ size }: IconProps) =>
  svg(
    <>
      <rect x="3" y="4" width="18" height="16" rx="2" />
      <path d="M9 4v16" />
    </>,
    size,
  );
export const DownloadIcon = ({ size }: IconProps) => svg(<path d="M12 4v11M7 10l5 5 5-5M5 20h14" />, size);
export const UploadIcon = ({ size }: IconProps) => svg(<path d="M12 20V9M7 14l5-5 5 5M5 4h14" />, size);
