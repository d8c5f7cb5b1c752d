import { NavLink, Route, Routes } from 'react-router-dom'
import routes from './routes.json'

// Every page module, by file name: src/pages/About.jsx -> "About".
const pages = import.meta.glob('./pages/*.jsx', { eager: true })

function pageComponent(name) {
  const module = pages[`./pages/${name}.jsx`]
  return module ? module.default : null
}

export default function App() {
  return (
    <div className="site">
      <nav className="site-nav">
        {routes.map((route) => (
          <NavLink key={route.path} to={route.path} end>
            {route.title}
          </NavLink>
        ))}
      </nav>
      <main className="site-main">
        <Routes>
          {routes.map((route) => {
            const Page = pageComponent(route.page)
            return (
              <Route
                key={route.path}
                path={route.path}
                element={Page ? <Page /> : <p>Missing page component {route.page}</p>}
              />
            )
          })}
        </Routes>
      </main>
    </div>
  )
}
